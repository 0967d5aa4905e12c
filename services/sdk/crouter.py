"""``Crouter``: one person's runtime, with its resources (runs, questions, memory, grant, providers,
profiles).

Build it through ``OAuth2Client.client(user_id)`` (tokens refreshed through the directory, a 401
refreshes once and repeats) or directly with a fixed token: ``Crouter(runtime_url=..., token=...,
transport=...)``. Methods named ``list`` return Python lists; other reads return the answer's
JSON object as the wire gives it (``services.wire``); runs come back as ``Run``.
"""

from __future__ import annotations

from typing import Any

import httpx

from services.clock import Clock

from .errors import CrouterError
from .http import FixedToken, RuntimeHttp, Sleep, TokenSource
from .models import Run
from .streams import RunReply, RunStream

__all__ = [
    "Crouter",
    "RunsResource",
    "QuestionsResource",
    "MemoryResource",
    "GrantResource",
    "ProvidersResource",
    "ProfilesResource",
]


def _items(answer: object, *keys: str) -> list[Any]:
    """The list inside a list answer: a bare JSON list, or the first of ``keys`` holding one."""
    if isinstance(answer, list):
        return answer
    if isinstance(answer, dict):
        for key in (*keys, "items", "data"):
            value = answer.get(key)
            if isinstance(value, list):
                return value
    raise CrouterError("the runtime answered a list operation without a list", code="invalid_response")


def _run(answer: object) -> Run:
    if isinstance(answer, dict) and isinstance(answer.get("run"), dict) and "id" not in answer:
        answer = answer["run"]
    if not isinstance(answer, dict) or "id" not in answer:
        raise CrouterError("the runtime answered without a run", code="invalid_response")
    return Run.from_dto(answer)


class RunsResource:
    """``client.runs``: start, read, message, stream and manage runs."""

    def __init__(self, http: RuntimeHttp) -> None:
        self._http = http

    async def start(
        self,
        prompt: str | None = None,
        *,
        isolated: bool | None = None,
        cwd: str | None = None,
        worktree: object = None,
        name: str | None = None,
        idempotency_key: str | None = None,
        max_retries: int | None = None,
        **params: Any,
    ) -> Run:
        """``run.start``: start a run (resent with the same ``Idempotency-Key`` when retryable)."""
        body: dict[str, Any] = {}
        if prompt is not None:
            body["prompt"] = prompt
        for key, value in (("isolated", isolated), ("cwd", cwd), ("worktree", worktree), ("name", name)):
            if value is not None:
                body[key] = value
        body.update(params)
        answer = await self._http.call(
            "run.start", body=body, idempotency_key=idempotency_key, max_retries=max_retries
        )
        return _run(answer)

    async def get(self, run_id: str, *, max_retries: int | None = None) -> Run:
        """``run.get``."""
        return _run(await self._http.call("run.get", path={"run_id": run_id}, max_retries=max_retries))

    async def list(
        self, status: str | None = None, limit: int | None = None, *, max_retries: int | None = None
    ) -> list[Run]:
        """``run.list``, optionally filtered by status and capped at ``limit``."""
        answer = await self._http.call(
            "run.list", params={"status": status, "limit": limit}, max_retries=max_retries
        )
        return [Run.from_dto(item) for item in _items(answer, "runs") if isinstance(item, dict)]

    async def message(
        self,
        run_id: str,
        text: str,
        start_turn: bool = True,
        idempotency_key: str | None = None,
        *,
        max_retries: int | None = None,
    ) -> dict[str, Any]:
        """``run.message``: the answer ``{message, run, cursor}``."""
        answer = await self._http.call(
            "run.message",
            path={"run_id": run_id},
            body={"text": text, "start_turn": start_turn},
            idempotency_key=idempotency_key,
            max_retries=max_retries,
        )
        return answer if isinstance(answer, dict) else {"value": answer}

    def reply(self, run_id: str, text: str, *, idempotency_key: str | None = None) -> RunReply:
        """Send ``text`` as a turn-starting message and follow the root turn it starts."""
        return RunReply(self, run_id, text, idempotency_key=idempotency_key)

    def events(self, run_id: str, after: int | None = None) -> RunStream:
        """The run's event stream from ``after`` (exclusive; None for the start)."""
        return RunStream(self._http, run_id, after=after)

    async def interrupt(self, run_id: str) -> Any:
        """``run.interrupt`` (never retried)."""
        return await self._http.call("run.interrupt", path={"run_id": run_id})

    async def cancel(self, run_id: str) -> Any:
        """``run.cancel`` (never retried)."""
        return await self._http.call("run.cancel", path={"run_id": run_id})

    async def delete(self, run_id: str, *, max_retries: int | None = None) -> Any:
        """``run.delete`` (retried like a read)."""
        return await self._http.call("run.delete", path={"run_id": run_id}, max_retries=max_retries)

    async def rename(self, run_id: str, name: str) -> Any:
        """``run.rename`` (never retried)."""
        return await self._http.call("run.rename", path={"run_id": run_id}, body={"name": name})

    async def trace(self, run_id: str, *, max_retries: int | None = None) -> dict[str, Any]:
        """``trace.get``: ``{run_id, spans}``."""
        return await self._http.call("trace.get", path={"run_id": run_id}, max_retries=max_retries)


class QuestionsResource:
    """``client.questions``: read and answer a run's open question."""

    def __init__(self, http: RuntimeHttp) -> None:
        self._http = http

    async def get(self, question_id: str, *, max_retries: int | None = None) -> dict[str, Any]:
        """``question.get``: the question DTO."""
        return await self._http.call("question.get", path={"question_id": question_id}, max_retries=max_retries)

    async def answer(self, question_id: str, answers: object) -> Any:
        """``question.answer`` (never retried)."""
        return await self._http.call(
            "question.answer", path={"question_id": question_id}, body={"answers": answers}
        )


class MemoryResource:
    """``client.memory``: the person's memory documents."""

    def __init__(self, http: RuntimeHttp) -> None:
        self._http = http

    async def list(self, kind: str | None = None, *, max_retries: int | None = None) -> list[dict[str, Any]]:
        """``memory.list``: list items, optionally of one ``kind``."""
        answer = await self._http.call("memory.list", params={"kind": kind}, max_retries=max_retries)
        return _items(answer, "memory", "documents")

    async def get(self, name: str, *, max_retries: int | None = None) -> dict[str, Any]:
        """``memory.get``: a list item plus ``body``."""
        return await self._http.call("memory.get", path={"name": name}, max_retries=max_retries)


class GrantResource:
    """``client.grant``: the app's grant for this person."""

    def __init__(self, http: RuntimeHttp) -> None:
        self._http = http

    async def get(
        self, wait: float | None = None, since: int | str | None = None, *, max_retries: int | None = None
    ) -> dict[str, Any]:
        """``grant.get``; with ``wait`` and ``since`` the read is held until the version differs."""
        timeout = None if wait is None else float(wait) + 30.0
        return await self._http.call(
            "grant.get", params={"wait": wait, "since": since}, max_retries=max_retries, timeout=timeout
        )


class ProvidersResource:
    """``client.providers``: provider tools and calls."""

    def __init__(self, http: RuntimeHttp) -> None:
        self._http = http

    async def tools(self, *, max_retries: int | None = None) -> dict[str, Any]:
        """``provider.tools``: ``{providers: [{name, status, error, tools}]}``."""
        return await self._http.call("provider.tools", max_retries=max_retries)

    async def call(self, provider: str, tool: str, arguments: object = None) -> Any:
        """``provider.call`` (never retried): what the tool returned (the answer's ``result``)."""
        answer = await self._http.call(
            "provider.call", path={"provider": provider, "tool": tool}, body={"arguments": arguments or {}}
        )
        return answer.get("result") if isinstance(answer, dict) and "result" in answer else answer


class ProfilesResource:
    """``client.profiles``."""

    def __init__(self, http: RuntimeHttp) -> None:
        self._http = http

    async def list(self, *, max_retries: int | None = None) -> list[dict[str, Any]]:
        """``profile.list``: ``[{name, description}]``."""
        return _items(await self._http.call("profile.list", max_retries=max_retries), "profiles")


class Crouter:
    """A client for one person's runtime."""

    def __init__(
        self,
        *,
        runtime_url: str,
        token: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_retries: int = 2,
        sleep: Sleep | None = None,
        clock: Clock | None = None,
        user_id: str | None = None,
        auth: TokenSource | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        """``token`` is a fixed bearer token (never refreshed); ``auth`` replaces it with a token
        source (``OAuth2Client`` passes one). ``sleep`` replaces the waits between retries."""
        if auth is None:
            if token is None:
                raise CrouterError("Crouter needs a token or a token source", code="invalid_request")
            auth = FixedToken(token)
        self.user_id = user_id
        self.clock = clock or Clock()
        self._owns_client = http_client is None
        self._client = http_client or httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(30.0))
        self._http = RuntimeHttp(
            runtime_url=runtime_url,
            client=self._client,
            auth=auth,
            sleep=sleep or self.clock.sleep,
            max_retries=max_retries,
        )
        self.runs = RunsResource(self._http)
        self.questions = QuestionsResource(self._http)
        self.memory = MemoryResource(self._http)
        self.grant = GrantResource(self._http)
        self.providers = ProvidersResource(self._http)
        self.profiles = ProfilesResource(self._http)

    @property
    def runtime_url(self) -> str:
        """The runtime this client talks to."""
        return self._http.runtime_url

    async def aclose(self) -> None:
        """Close the HTTP client when this ``Crouter`` made it."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> "Crouter":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
