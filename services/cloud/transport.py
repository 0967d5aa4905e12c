"""``CloudTransport``: the httpx transport through which every SDK request reaches the fake.

It reads the request, sends URLs under the issuer to the directory and everything else to the
runtime, records each runtime call made with a token it signed in ``cloud.calls`` (the newest
``cloud.limits.calls`` of them), runs scripted failures and gates,
checks the runtime version and the bearer token, then dispatches on ``services.wire.ROUTES``.

Base URLs may carry a path (``https://h/tenant``): the route is what follows the base
(``wire.route_under``, the inverse of the SDK's ``wire.join_url``). A runtime request is read
under its person's ``runtime_url`` (the bearer token's ``sub``; a callable option is asked for
that person), so a callable ``runtime_url`` with a path works like a fixed one.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any
from urllib.parse import unquote

import httpx

from ..wire import (
    DIRECTORY_DISCOVERY_PATH,
    DIRECTORY_JWKS_PATH,
    DIRECTORY_TOKEN_PATH,
    IDEMPOTENCY_KEY,
    MIN_RUNTIME_HEADER,
    RUNTIME_VERSION_HEADER,
    match_route,
    route_under,
    version_tuple,
)
from .errors import CloudError
from .failures import InterceptContext
from .directory import Directory
from .host import CloudHost
from .records import CallRecord
from .runtime import Request, RuntimeOps
from .users import FakeUser

__all__ = ["CallRecord", "CloudTransport"]

_DIRECTORY_ROUTES = frozenset({DIRECTORY_DISCOVERY_PATH, DIRECTORY_TOKEN_PATH, DIRECTORY_JWKS_PATH})
_RUN_OPS = frozenset(
    {"run.get", "run.message", "run.events", "run.interrupt", "run.cancel", "run.delete", "run.rename", "trace.get"}
)


class _BadBody(Exception):
    pass


class CloudTransport(httpx.AsyncBaseTransport):
    """Answers directory and runtime requests for one ``FakeCloud``."""

    def __init__(self, cloud: CloudHost, directory: Directory, ops: RuntimeOps) -> None:
        self.cloud = cloud
        self.state = cloud.state
        self.directory = directory
        self.ops = ops

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raw = await request.aread()
        cloud = self.cloud
        url = str(request.url)
        route = route_under(cloud.issuer, url)
        if route is not None and (unquote(route) in _DIRECTORY_ROUTES or self._route(url, None) is None):
            # under the issuer and not under a runtime URL (a served cloud keeps both on one
            # origin: there the directory answers its own routes and the runtime every other)
            return await self.directory.handle(request, raw, unquote(route))
        return await self._runtime(request, raw)

    def _route(self, url: str, user_id: str | None) -> str | None:
        """The route path of a runtime ``url`` below the person's runtime URL (or, without a known
        person, below any runtime URL this cloud answers); None when it is under none of them."""
        cloud = self.cloud
        if user_id is not None:
            bases = [cloud.runtime_url_for(user_id)]
        elif callable(cloud.runtime_url):
            bases = [cloud.runtime_url_for(known) for known in self.state.users]
        else:
            bases = [cloud.runtime_url]
        for base in bases:
            route = route_under(base, url)
            if route is not None:
                return unquote(route)
        return None

    async def _runtime(self, request: httpx.Request, raw: bytes) -> httpx.Response:
        cloud = self.cloud
        token = _bearer(request)
        claims = self.state.key.claims_of(token) if token else None
        sub = claims.get("sub") if claims else None
        user_id = sub if isinstance(sub, str) and sub in self.state.users else None
        route = self._route(str(request.url), user_id)
        path = route if route is not None else request.url.path
        query = dict(request.url.params)
        try:
            body: object = json.loads(raw) if raw else None
            bad_body = None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            body, bad_body = None, str(exc)
        except RecursionError:
            body, bad_body = None, "nested too deeply"
        matched = match_route(request.method, route) if route is not None else None
        op = matched[0].op if matched else None
        params = matched[1] if matched else {}
        run_id = params.get("run_id") if op in _RUN_OPS else None
        question_id = params.get("question_id") if op in ("question.get", "question.answer") else None
        if question_id is not None:
            holder = self.state.questions.get(question_id)
            run_id = holder.id if holder is not None and holder.user_id == user_id else None
        record = CallRecord(
            user_id,
            op,
            run_id,
            question_id,
            request.method,
            path,
            query,
            json.loads(raw) if body is not None else None,  # the record's own copy of the body
            request.headers.get(IDEMPOTENCY_KEY),
            None,
            cloud.clock.time(),
        )
        if user_id is not None:  # a call that names no person this directory signed for is not kept
            calls = cloud.calls
            calls.append(record)
            cap = cloud.limits.calls
            if len(calls) > cap + cap // 8:  # trimmed in batches: appending stays O(1) on average
                del calls[: len(calls) - cap]
        try:
            response = await self._dispatch(request, record, token, claims, params, body, bad_body)
        except CloudError as exc:
            response = exc.response()
        record.status = response.status_code
        if RUNTIME_VERSION_HEADER not in response.headers:
            response.headers[RUNTIME_VERSION_HEADER] = cloud.runtime_version
        return response

    async def _dispatch(
        self,
        request: httpx.Request,
        record: CallRecord,
        token: str | None,
        claims: dict[str, Any] | None,
        params: dict[str, str],
        body: object,
        bad_body: str | None,
    ) -> httpx.Response:
        cloud = self.cloud
        if record.op is None:
            raise CloudError(404, "not_found", f"no runtime route {request.method} {request.url}")
        ctx = InterceptContext(record.op, record.user_id, request.method, record.path, record.query, record.body, record.run_id)
        answer = await self.state.failures.run(ctx)
        if answer == "unreachable":
            raise httpx.ConnectError(f"{request.url.host} is unreachable", request=request)
        if isinstance(answer, CloudError):
            return answer.response()
        minimum = request.headers.get(MIN_RUNTIME_HEADER)
        if minimum and not _version_like(minimum):
            raise CloudError(400, "invalid_request", f"{MIN_RUNTIME_HEADER} must be a version like 1.2.0",
                             param=MIN_RUNTIME_HEADER)
        if minimum and _older(cloud.runtime_version, minimum):
            raise CloudError(
                426,
                "runtime_version_unsupported",
                f"runtime {cloud.runtime_version} is older than the client's minimum {minimum}",
                details={"runtime_version": cloud.runtime_version, "minimum": minimum},
            )
        user = self._authenticate(token, claims)
        if bad_body is not None:
            raise CloudError(400, "invalid_request", f"malformed JSON body: {bad_body}", param="body")
        req = Request(record.op, user, params, record.query, body, record.idempotency_key, request, record)
        result = await self.ops.handler(record.op)(req)
        if isinstance(result, httpx.Response):
            return result
        return httpx.Response(200, content=_encode_json(result), headers=[
            (b"content-type", b"application/json"), (RUNTIME_VERSION_HEADER.encode(), cloud.runtime_version.encode()),
        ])

    def _authenticate(self, token: str | None, claims: dict[str, Any] | None) -> FakeUser:
        cloud = self.cloud
        if not token:
            raise CloudError(401, "unauthorized", "missing bearer token")
        if claims is None or claims.get("iss") != cloud.issuer or claims.get("aud") != cloud.runtime_id:
            raise CloudError(401, "invalid_token", "the bearer token is not one this directory issued")
        user = self.state.users.get(claims.get("sub", ""))
        if user is None:
            raise CloudError(401, "invalid_token", "the bearer token names no known person")
        if float(claims.get("exp", 0)) <= cloud.clock.time():
            raise CloudError(401, "token_expired", "the access token has expired")
        if int(claims.get("n", 0)) < user.tokens_valid_from:
            raise CloudError(401, "token_expired", "the access token was invalidated")
        if not user.grant.active:
            raise CloudError(401, "grant_revoked", "the grant is not active")
        return user


_encode_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
"""As ``httpx.Response(json=...)`` encodes a body: compact, UTF-8, no NaN."""


@functools.lru_cache(maxsize=64)
def _version_like(text: str) -> bool:
    return re.fullmatch(r"[0-9]{1,9}(\.[0-9A-Za-z-]{1,20}){0,4}", text) is not None


@functools.lru_cache(maxsize=64)
def _older(version: str, minimum: str) -> bool:
    return version_tuple(version) < version_tuple(minimum)


def _bearer(request: httpx.Request) -> str | None:
    value = request.headers.get("authorization", "")
    if value[:7].lower() == "bearer ":
        return value[7:].strip() or None
    return None
