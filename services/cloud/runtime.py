"""The fake runtime's operations: one handler per wire operation (``services.wire.ROUTES``)."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import itertools
import inspect
import json
import math
import posixpath
import re
from dataclasses import dataclass
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from ..clock import iso
from ..wire import FAILURES
from .errors import CloudError
from .limits import decimal_int
from .runs import FakeRun
from .shared import Keyed
from .stream import EventStream

from .host import CloudHost
from .records import CallRecord
from .users import FakeUser

__all__ = ["Request", "RuntimeOps", "ToolCall"]

_RUN_ID = re.compile(r"^run_[A-Za-z0-9_-]{1,64}$")
MEMORY_MANAGE_SCOPE = "crtr:memory:manage:user"


@dataclass
class Request:
    """A parsed runtime request, handed to an operation's handler."""

    op: str
    user: "FakeUser"
    params: dict[str, str]
    query: dict[str, str]
    body: object
    """The decoded JSON body (any JSON value; ``RuntimeOps._body`` narrows it to an object)."""
    idempotency_key: str | None
    http: httpx.Request
    record: CallRecord | None = None


@dataclass(frozen=True)
class ToolCall:
    """What a provider tool's handler receives."""

    user_id: str
    provider: str
    tool: str
    arguments: dict[str, Any]


Answer = dict[str, object]
"""An operation's JSON answer, encoded by the transport as it is returned."""


def _invalid(message: str, param: str | None) -> CloudError:
    return CloudError(400, "invalid_request", message, param=param)


def _check_size(text: str, limit: int, param: str) -> None:
    """Refuse ``text`` longer than ``limit`` characters with 413 naming the field and the limit."""
    if len(text) > limit:
        raise CloudError(413, "payload_too_large", f"{param} is longer than the limit of {limit} characters",
                         param=param, details={"limit": limit})


def _fingerprint(op: str, scope: str, body: object) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{op}\n{scope}\n{canonical}".encode("utf-8", "surrogatepass")).hexdigest()


class RuntimeOps:
    """Every runtime operation of one cloud (its idempotency keys are ``CloudState.idempotency``)."""

    def __init__(self, cloud: CloudHost) -> None:
        self.cloud = cloud
        self.state = cloud.state

    # -- helpers ---------------------------------------------------------------------------

    def _run(self, req: Request) -> FakeRun:
        run_id = req.params["run_id"]
        run = self.state.runs.get(run_id)
        if run is None or run.deleted or run.user_id != req.user.id:
            raise CloudError(404, "run_not_found", f"no run {run_id}")
        return run

    def _body(self, req: Request) -> dict[str, Any]:
        if req.body is None:
            return {}
        if not isinstance(req.body, dict):
            raise _invalid("the request body must be a JSON object", "body")
        return req.body

    def _replay(self, req: Request, fingerprint: str) -> httpx.Response | None:
        key = req.idempotency_key
        if key is not None and not key.strip():  # sent but blank: a client bug that would drop the retry safety
            raise _invalid("Idempotency-Key must not be empty: send a unique key, or leave the header out", "Idempotency-Key")
        if not key:
            return None
        stored = self.state.idempotency.get((req.user.id, key))
        if stored is None:
            return None
        if stored.op != req.op or stored.fingerprint != fingerprint:
            raise CloudError(
                409,
                "idempotency_conflict",
                f"Idempotency-Key {key!r} was used for a different request",
                param="Idempotency-Key",
            )
        return httpx.Response(stored.status, json=stored.body)

    def _remember(self, req: Request, fingerprint: str, run_id: str, status: int, body: dict[str, Any]) -> None:
        if req.idempotency_key:
            keys = self.state.idempotency
            keys[(req.user.id, req.idempotency_key)] = Keyed(req.op, fingerprint, run_id, status, body)
            cap = self.cloud.limits.idempotency_keys
            if len(keys) > cap + cap // 8:  # a window, trimmed in batches: the oldest keys go
                for owner in list(itertools.islice(keys, len(keys) - cap)):
                    del keys[owner]

    # -- grant -----------------------------------------------------------------------------

    async def grant_get(self, req: Request) -> Answer:
        user = req.user
        reads = user.reads
        reads.append(req.record)
        cap = self.cloud.limits.calls
        if len(reads) > cap + cap // 8:  # call records, bounded like ``cloud.calls``: the oldest go
            del reads[: len(reads) - cap]
        wait_text, since_text = req.query.get("wait"), req.query.get("since")
        try:
            wait = float(wait_text) if wait_text else 0.0
        except ValueError:
            raise _invalid("wait must be a number of seconds", "wait") from None
        if not math.isfinite(wait) or wait < 0:
            raise _invalid("wait must be a finite, non-negative number of seconds", "wait")
        wait = min(wait, self.cloud.limits.wait_s)  # the runtime's own limit on a held read
        since = decimal_int(since_text) if since_text is not None else None
        if since_text is not None and since is None:
            raise _invalid("since must be a grant version", "since")
        state = user.grant.state
        if state is None:
            raise CloudError(404, "grant_not_found", f"{user.id} has no grant")
        if wait > 0 and since is not None and since == state["version"]:
            user.holding += 1
            try:
                changed = asyncio.ensure_future(user.grant.wait_change())
                timeout = asyncio.ensure_future(self.cloud.clock.sleep(wait))
                try:
                    await asyncio.wait({changed, timeout}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
                    timeout.cancel()
            finally:
                user.holding -= 1
            if not user.grant.active:
                raise CloudError(401, "grant_revoked", "the grant is not active")
            state = user.grant.state
        return state  # type: ignore[return-value]

    # -- runs ------------------------------------------------------------------------------

    async def run_start(self, req: Request) -> httpx.Response:
        body = self._body(req)
        fingerprint = _fingerprint(req.op, "", body)
        replay = self._replay(req, fingerprint)
        if replay is not None:
            return replay
        cloud, state = self.cloud, self.state
        prompt = body.get("prompt", "")
        if not isinstance(prompt, str):
            raise _invalid("prompt must be a string", "prompt")
        _check_size(prompt, cloud.limits.prompt_chars, "prompt")
        if "worktree" in body and body["worktree"] is not None:
            raise _invalid("worktree is not supported on this runtime", "worktree")
        isolated = body.get("isolated")
        if isolated is not None and not isinstance(isolated, bool):
            raise _invalid("isolated must be a boolean", "isolated")
        name = body.get("name")
        if name is not None and not isinstance(name, str):
            raise _invalid("name must be a string", "name")
        if name is not None:
            _check_size(name, cloud.limits.message_chars, "name")
        run_id = body.get("id")
        if run_id is not None:
            if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
                raise _invalid("id must look like run_<letters, digits, - or _>", "id")
            if run_id in state.runs and not state.runs[run_id].deleted:
                raise CloudError(409, "run_exists", f"run {run_id} already exists", param="id")
        else:
            run_id = state.new_id("run")
        if isolated and cloud.isolated_runs == "unavailable":
            raise CloudError(
                503, "isolated_unavailable", "this runtime cannot start isolated runs", param="isolated", retryable=True
            )
        cwd = body.get("cwd")
        if cwd is not None:
            if isolated is not True:
                raise _invalid("cwd is accepted only with isolated: true", "cwd")
            root = f"/apps/{cloud.client_id}/nodes/{run_id}"
            if not isinstance(cwd, str) or not cwd.startswith("/") or "\x00" in cwd:
                raise _invalid(f"cwd must be an absolute path inside {root}", "cwd")
            normal = posixpath.normpath(cwd)
            if normal != root and not normal.startswith(root + "/"):
                raise _invalid(f"cwd must be an absolute path inside {root}", "cwd")
        params = copy.deepcopy(body)
        params.pop("id", None)
        run = state.create_run(run_id, req.user.id, params, req.idempotency_key, name)
        dto = run.to_dto()
        self._remember(req, fingerprint, run.id, 201, dto)
        state.respond(run, "start", [])
        return httpx.Response(201, json=dto)

    async def run_message(self, req: Request) -> httpx.Response:
        body = self._body(req)
        fingerprint = _fingerprint(req.op, req.params["run_id"], body)
        replay = self._replay(req, fingerprint)
        if replay is not None:
            return replay
        run = self._run(req)
        text = body.get("text")
        if not isinstance(text, str):
            raise _invalid("text must be a string", "text")
        _check_size(text, self.cloud.limits.message_chars, "text")
        start_turn = body.get("start_turn", True)
        if not isinstance(start_turn, bool):
            raise _invalid("start_turn must be a boolean", "start_turn")
        if run.settled:
            outcome = (run.outcome or {}).get("outcome")
            if outcome in FAILURES:
                raise CloudError(409, "run_settled", f"run {run.id} is settled ({outcome})")
            run.emit("node.reopened", {})
        message = {
            "id": self.state.new_id("msg"),
            "text": text,
            "at": iso(self.cloud.clock.time()),
            "delivered": False,
        }
        run.messages.append(message)
        event = run.emit("node.message.received", {"message": copy.deepcopy(message), "start_turn": start_turn})
        answer = {"message": copy.deepcopy(message), "run": run.to_dto(), "cursor": event["seq"] - 1}
        self._remember(req, fingerprint, run.id, 201, answer)
        if start_turn:
            self.state.respond(run, "message", [copy.deepcopy(message)])
        return httpx.Response(201, json=answer)

    async def run_get(self, req: Request) -> Answer:
        return self._run(req).to_wire()  # encoded by the transport before anything runs again

    async def run_list(self, req: Request) -> Answer:
        # chosen by what each run's slot knows; only those answered are read (a stored one as a copy)
        slots = [s for s in self.state.run_log.slots if s.user_id == req.user.id and not s.is_deleted]
        status = req.query.get("status")
        if status:
            slots = [s for s in slots if s.run_status == status]
        limit = req.query.get("limit")
        if limit is not None:
            count = decimal_int(limit)
            if count is None or count < 0:
                raise _invalid("limit must be a non-negative integer", "limit")
            slots = slots[-count:] if count else []
        return {"runs": [r.to_dto() for r in self.state.runs.copies(slots)]}

    async def run_events(self, req: Request) -> httpx.Response:
        run = self._run(req)
        after_text = req.query.get("after") or req.http.headers.get("Last-Event-ID") or "0"
        after = decimal_int(after_text)
        if after is None or after < 0:
            raise _invalid("after must be an event id", "after")
        stream = EventStream(self.cloud, run, after)
        return httpx.Response(200, headers={"content-type": "text/event-stream", "cache-control": "no-cache"}, stream=stream)

    async def run_interrupt(self, req: Request) -> Answer:
        run = self._run(req)
        if run.status == "running":
            run.emit("run.interrupted", {})
            run.idle()
        return run.to_dto()

    async def run_cancel(self, req: Request) -> Answer:
        run = self._run(req)
        if not run.settled:
            run.settle(failure="canceled")
        return run.to_dto()

    async def run_delete(self, req: Request) -> Answer:
        run = self._run(req)
        run.delete()
        return {"id": run.id, "deleted": True}

    async def run_rename(self, req: Request) -> Answer:
        run = self._run(req)
        name = self._body(req).get("name")
        if not isinstance(name, str) or not name.strip():
            raise _invalid("name must be a non-empty string", "name")
        _check_size(name, self.cloud.limits.message_chars, "name")
        run.emit("run.renamed", {"name": name})
        return run.to_dto()

    async def trace_get(self, req: Request) -> Answer:
        run = self._run(req)
        spans: dict[str, dict[str, Any]] = {}
        for event in run.events:
            entry = event.get("entry_id")
            if not entry:
                continue
            span = spans.setdefault(entry, {"entry_id": entry, "node_id": event["node_id"], "started_at": event["at"]})
            if event["type"] == "node.turn.completed":
                span["completed_at"] = event["at"]
                span["stop_reason"] = event.get("stop_reason")
        return {"run_id": run.id, "spans": list(spans.values())}

    # -- questions -------------------------------------------------------------------------

    def _question(self, req: Request) -> tuple[FakeRun, dict[str, Any]]:
        question_id = req.params["question_id"]
        run = self.state.questions.get(question_id)
        if run is None or run.deleted or run.user_id != req.user.id:
            raise CloudError(404, "question_not_found", f"no question {question_id}")
        return run, self.state.question_dto(run, question_id)

    async def question_get(self, req: Request) -> Answer:
        return self._question(req)[1]

    async def question_answer(self, req: Request) -> Answer:
        run, question = self._question(req)
        answers = self._body(req).get("answers")
        if not isinstance(answers, (dict, list)):
            raise _invalid("answers must be an object or a list", "answers")
        if question["status"] != "open":
            raise CloudError(409, "question_closed", f"question {question['id']} is already answered")
        run.emit("node.question.answered", {"question_id": question["id"], "answers": copy.deepcopy(answers)})
        return self.state.question_dto(run, question["id"])

    # -- memory, providers, profiles -----------------------------------------------------------

    async def memory_list(self, req: Request) -> Answer:
        manage = MEMORY_MANAGE_SCOPE in req.user.grant.scopes
        kind = req.query.get("kind")
        items = [
            {k: v for k, v in doc.items() if k != "body"}
            for doc in req.user.memory.visible(manage)
            if not kind or doc["kind"] == kind
        ]
        return {"documents": copy.deepcopy(items)}

    async def memory_get(self, req: Request) -> Answer:
        manage = MEMORY_MANAGE_SCOPE in req.user.grant.scopes
        name = req.params["name"]
        for doc in req.user.memory.visible(manage):
            if doc["name"] == name:
                return copy.deepcopy(doc)
        raise CloudError(404, "document_not_found", f"no document {name}")

    async def provider_tools(self, req: Request) -> Answer:
        return {"providers": [p.to_dto() for p in self.cloud.providers.all]}

    async def provider_call(self, req: Request) -> Answer:
        provider = self.cloud.providers.get(req.params["provider"])
        if provider is None:
            raise CloudError(404, "provider_not_found", f"no provider {req.params['provider']}")
        if provider.status == "install_failed":
            raise CloudError(
                503, "provider_unavailable", f"{provider.name} failed to install: {provider.error}", origin="provider"
            )
        tool = provider.tools.get(req.params["tool"])
        if tool is None:
            raise CloudError(404, "tool_not_found", f"{provider.name} has no tool {req.params['tool']}")
        scope = f"{provider.name}:{tool.group}"
        if scope not in req.user.grant.scopes:
            raise CloudError(403, "scope_missing", f"the grant lacks {scope}", details={"scope": scope})
        arguments = self._body(req).get("arguments", {})
        if not isinstance(arguments, dict):
            raise _invalid("arguments must be an object", "arguments")
        call = ToolCall(req.user.id, provider.name, tool.name, copy.deepcopy(arguments))
        try:
            result = tool.handler(call)
            if inspect.isawaitable(result):
                result = await result
        except CloudError:
            raise
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise CloudError(502, "provider_error", f"{provider.name}.{tool.name} failed: {exc}", origin="provider") from None
        return {"result": result}

    async def profile_list(self, req: Request) -> Answer:
        return {"profiles": copy.deepcopy(self.cloud.profiles)}

    def handler(self, op: str) -> Callable[[Request], Awaitable[Answer | httpx.Response]]:
        """The handler method for a wire operation name."""
        handler: Callable[[Request], Awaitable[Answer | httpx.Response]] = getattr(self, op.replace(".", "_"))
        return handler
