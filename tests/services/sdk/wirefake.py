"""A small scripted wire for the SDK's unit tests: a directory and a runtime behind one
``httpx.MockTransport``. Only the wire is faked; every SDK part under test is the real one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qs

import httpx
import jwt

from services import wire

ISSUER = "https://directory.test"
RUNTIME = "https://runtime.test"
TOKEN_ENDPOINT = ISSUER + wire.DIRECTORY_TOKEN_PATH

Answer = Any  # int status | "unreachable" | dict envelope | httpx.Response | callable(request) -> Response


def envelope(status: int, code: str, *, retryable: bool | None = None, origin: str = "runtime", **extra: Any) -> dict:
    """An error envelope as the wire carries it."""
    body = {
        "status": status,
        "code": code,
        "message": f"{code} ({status})",
        "origin": origin,
        "retryable": retryable if retryable is not None else status == 503,
        "details": None,
        "param": None,
    }
    body.update(extra)
    return body


def run_dto(run_id: str = "run_1", **fields: Any) -> dict[str, Any]:
    """A run DTO with every field."""
    dto = {
        "id": run_id,
        "user_id": "user:o1",
        "name": None,
        "status": "running",
        "activity": None,
        "params": {"prompt": "hello"},
        "outcome": None,
        "result": None,
        "last_turn_error": None,
        "question": None,
        "pending": [],
        "messages": [],
        "created_at": "2026-11-30T03:00:00.000Z",
        "updated_at": "2026-11-30T03:00:00.000Z",
        "last_event_id": None,
    }
    dto.update(fields)
    return dto


def sse_frame(event_type: str, data: dict[str, Any], event_id: int | None = None) -> bytes:
    """One server-sent event."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event_type}\ndata: {json.dumps(data)}\n\n".encode()


def run_event(seq: int, event_type: str, run_id: str = "run_1", node_id: str | None = None, **fields: Any) -> bytes:
    """A run event frame with its seq as id."""
    body = {
        "id": f"ev_{seq}",
        "seq": seq,
        "run_id": run_id,
        "node_id": node_id or run_id,
        "type": event_type,
        "at": "2026-11-30T03:00:00.000Z",
        **fields,
    }
    return sse_frame(event_type, body, seq)


def stream_response(chunks: list[bytes], *, hang: bool = False) -> httpx.Response:
    """A 200 event stream sending ``chunks``; ``hang`` keeps it open afterwards (until cancelled)."""

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
            await asyncio.sleep(0)
        if hang:
            await asyncio.Event().wait()

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


class MiniWire:
    """A scripted directory + runtime. ``script(op, *answers)`` queues answers for an operation;
    unscripted calls go to ``handlers[op]`` (default: a plain 200 JSON answer)."""

    def __init__(self, *, expires_in: int = 3600) -> None:
        self.expires_in = expires_in
        self.calls: list[tuple[str, httpx.Request]] = []
        self.directory_calls: list[tuple[str, httpx.Request]] = []
        self.scripts: dict[str, list[Answer]] = {}
        self.handlers: dict[str, Callable[[httpx.Request, dict[str, str]], Any]] = {}
        self.refresh_token = "rt_0"
        self.issued = 0
        self.valid_access: set[str] = {"fixed-token"}
        self.refuse_code: str | None = None
        self.token_gate: asyncio.Event | None = None
        self.assertions: list[str] = []
        self.jwks: dict[str, Any] = {"keys": []}
        self.transport = httpx.MockTransport(self.handle)

    def script(self, op: str, *answers: Answer) -> None:
        """Queue ``answers`` for the next calls of ``op`` (a runtime or directory op)."""
        self.scripts.setdefault(op, []).extend(answers)

    def ops(self) -> list[str]:
        """The runtime ops called, in order."""
        return [op for op, _ in self.calls]

    def _scripted(self, op: str, request: httpx.Request) -> httpx.Response | None:
        queue = self.scripts.get(op)
        if not queue:
            return None
        answer = queue.pop(0)
        if callable(answer):
            answer = answer(request)
        if answer == "unreachable":
            raise httpx.ConnectError("unreachable", request=request)
        if isinstance(answer, int):
            return httpx.Response(answer, json={"error": envelope(answer, f"http_{answer}", retryable=False)})
        if isinstance(answer, dict):
            return httpx.Response(answer["status"], json={"error": answer})
        return answer

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "directory.test":
            return await self._directory(request)
        route = wire.match_route(request.method, request.url.path)
        if route is None:
            return httpx.Response(404, json={"error": envelope(404, "not_found")})
        op, params = route[0].op, route[1]
        self.calls.append((op, request))
        scripted = self._scripted(op, request)
        if scripted is not None:
            return scripted
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        if bearer not in self.valid_access:
            return httpx.Response(401, json={"error": envelope(401, "invalid_token")})
        handler = self.handlers.get(op)
        if handler is not None:
            result = handler(request, params)
            if asyncio.iscoroutine(result):
                result = await result
            return result if isinstance(result, httpx.Response) else httpx.Response(200, json=result)
        return httpx.Response(200, json=self._default(op, request, params))

    def _default(self, op: str, request: httpx.Request, params: dict[str, str]) -> Any:
        if op in ("run.start", "run.get"):
            return run_dto(params.get("run_id", "run_1"))
        if op == "run.list":
            return {"runs": [run_dto("run_1"), run_dto("run_2")]}
        if op == "run.message":
            return {"message": {"id": "m1", "text": "x"}, "run": run_dto(params["run_id"]), "cursor": 0}
        if op == "memory.list":
            return {"items": [{"name": "o1/notes/a.md", "kind": "knowledge", "privacy": "public"}]}
        if op == "profile.list":
            return {"profiles": [{"name": "default", "description": "the default profile"}]}
        if op == "grant.get":
            return {"version": 1, "rev": 1, "state": "active"}
        return {"ok": True, "op": op}

    async def _directory(self, request: httpx.Request) -> httpx.Response:
        op = {
            wire.DIRECTORY_DISCOVERY_PATH: "directory.discovery",
            wire.DIRECTORY_TOKEN_PATH: "directory.token",
            wire.DIRECTORY_JWKS_PATH: "directory.jwks",
        }.get(request.url.path, "directory.unknown")
        self.directory_calls.append((op, request))
        scripted = self._scripted(op, request)
        if scripted is not None:
            return scripted
        if op == "directory.discovery":
            return httpx.Response(
                200,
                json={
                    "issuer": ISSUER,
                    "token_endpoint": TOKEN_ENDPOINT,
                    "jwks_uri": ISSUER + wire.DIRECTORY_JWKS_PATH,
                    "token_endpoint_auth_methods_supported": ["private_key_jwt"],
                },
            )
        if op == "directory.token":
            return await self._token(request)
        if op == "directory.jwks":
            return httpx.Response(200, json=self.jwks)
        return httpx.Response(404, json={"error": envelope(404, "not_found", origin="directory")})

    async def _token(self, request: httpx.Request) -> httpx.Response:
        if self.token_gate is not None:
            await self.token_gate.wait()
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        self.assertions.append(form.get("client_assertion", ""))
        if self.refuse_code is not None or form.get("refresh_token") != self.refresh_token:
            code = self.refuse_code or "refresh_token_reused"
            return httpx.Response(400, json={"error": envelope(400, code, origin="directory")})
        self.issued += 1
        access = f"at_{self.issued}"
        self.refresh_token = f"rt_{self.issued}"
        self.valid_access.add(access)
        return httpx.Response(
            200,
            json={
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": self.expires_in,
                "refresh_token": self.refresh_token,
                "scope": "crtr:llm crtr:act",
                "user_id": "user:o1",
                "runtime_url": RUNTIME,
                "runtime_id": "runtime:test",
            },
        )

    def jwks_fetches(self) -> int:
        return sum(1 for op, _ in self.directory_calls if op == "directory.jwks")

    def token_refreshes(self) -> int:
        return sum(1 for op, _ in self.directory_calls if op == "directory.token")


def decode_assertion(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of a client assertion, verified with the jwk its header carries."""
    header = jwt.get_unverified_header(token)
    key = jwt.PyJWK(header["jwk"], algorithm=header["alg"]).key
    claims = jwt.decode(
        token, key, algorithms=[header["alg"]], audience=TOKEN_ENDPOINT,
        options={"verify_iat": False, "verify_exp": False},
    )
    return header, claims
