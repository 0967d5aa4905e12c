"""The served wire as an OpenAPI 3.1 document (``GET /openapi.json`` on a served cloud).

Made from the declarations the SDK and the fake share: the runtime's operations from
``services.wire.ROUTES`` (with the bodies and queries ``RUNTIME_REQUESTS`` declares for them, as
``wire.ROUTES``' docstring lists them), the directory's three routes, and the control API from
``services.control_wire.CONTROL_ROUTES``. Every error answer is the wire's envelope. The document
is for generating a client in any language; the server does not validate against it (it checks
each field where it reads it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .control_wire import CONTROL_PREFIX, CONTROL_ROUTES, object_schema
from .wire import (
    CLIENT_ASSERTION_TYPE,
    DIRECTORY_DISCOVERY_PATH,
    DIRECTORY_JWKS_PATH,
    DIRECTORY_TOKEN_PATH,
    IDEMPOTENCY_KEY,
    LAST_EVENT_ID,
    MIN_RUNTIME_HEADER,
    ROUTES,
    RUN_STATUSES,
)

__all__ = ["openapi_document", "RUNTIME_REQUESTS"]

_STR = {"type": "string"}
_INT = {"type": "integer"}
_OBJ = {"type": "object"}
_RUN = {
    "type": "object",
    "required": ["id", "user_id", "status", "created_at", "updated_at"],
    "properties": {"id": _STR, "user_id": _STR, "name": {"type": ["string", "null"]},
                   "status": {"enum": list(RUN_STATUSES)}, "created_at": _STR, "updated_at": _STR},
}
_QUESTION = {"type": "object", "required": ["id", "run_id", "status"],
             "properties": {"id": _STR, "run_id": _STR, "status": {"enum": ["open", "answered"]}}}

RUNTIME_REQUESTS: dict[str, dict[str, Any]] = {  # each spec mixes schema objects and flags: read by key below
    "grant.get": {"query": {"wait": {"type": "number", "minimum": 0}, "since": _INT},
                  "answer": {"type": "object", "required": ["version", "state"],
                             "properties": {"version": _INT, "state": {"enum": ["active", "revoked"]}}}},
    "run.start": {"body": {"type": "object", "properties": {
        "prompt": _STR, "name": {"type": ["string", "null"]}, "isolated": {"type": ["boolean", "null"]},
        "cwd": {"type": ["string", "null"]}, "profile": _STR,
        "id": {"type": "string", "pattern": "^run_[A-Za-z0-9_-]{1,64}$"}}},
        "keyed": True, "status": "201", "answer": _RUN},
    "run.list": {"query": {"status": {"enum": list(RUN_STATUSES)}, "limit": {"type": "integer", "minimum": 0}},
                 "answer": {"type": "object", "required": ["runs"],
                            "properties": {"runs": {"type": "array", "items": _RUN}}}},
    "run.get": {"answer": _RUN},
    "run.delete": {"answer": {"type": "object", "required": ["id", "deleted"]}},
    "run.message": {"body": {"type": "object", "required": ["text"],
                             "properties": {"text": _STR, "start_turn": {"type": "boolean"}}},
                    "keyed": True, "status": "201",
                    "answer": {"type": "object", "required": ["message", "run", "cursor"],
                               "properties": {"run": _RUN, "cursor": _INT}}},
    "run.events": {"query": {"after": {"type": "integer", "minimum": 0}}, "stream": True},
    "run.interrupt": {"answer": _RUN},
    "run.cancel": {"answer": _RUN},
    "run.rename": {"body": {"type": "object", "required": ["name"], "properties": {"name": _STR}},
                   "answer": _RUN},
    "trace.get": {"answer": {"type": "object", "required": ["run_id", "spans"]}},
    "question.get": {"answer": _QUESTION},
    "question.answer": {"body": {"type": "object", "required": ["answers"],
                                 "properties": {"answers": {"type": ["object", "array"]}}},
                        "answer": _QUESTION},
    "memory.list": {"query": {"kind": _STR},
                    "answer": {"type": "object", "required": ["documents"]}},
    "memory.get": {"answer": {"type": "object", "required": ["name", "body"]}},
    "provider.tools": {"answer": {"type": "object", "required": ["providers"]}},
    "provider.call": {"body": {"type": "object", "properties": {"arguments": _OBJ}},
                      "answer": {"type": "object", "required": ["result"]}},
    "profile.list": {"answer": {"type": "object", "required": ["profiles"]}},
}
"""What each runtime operation reads besides its path, and what it answers (``wire``'s docstring)."""

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["code", "message"],
        "properties": {"status": _INT, "code": _STR, "message": _STR, "origin": _STR, "retryable": {"type": "boolean"},
                       "param": {"type": ["string", "null"]}, "retry_after_s": {"type": "number"}},
    }},
}


def _path_params(template: str, enums: dict[str, tuple[str, ...]] | None = None) -> tuple[str, list[dict[str, object]]]:
    import re

    params = []
    for name, _ in re.findall(r"\{(\w+)(:path)?\}", template):
        schema: dict[str, object] = {"type": "string", "minLength": 1}
        if enums and name in enums:
            schema = {"enum": list(enums[name])}
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
    return re.sub(r"\{(\w+):path\}", r"{\1}", template), params


def _answers(status: str, schema: Mapping[str, object] | None, *, stream: bool = False) -> dict[str, dict[str, object]]:
    if stream:
        ok: dict[str, object] = {"description": "server-sent events", "content": {"text/event-stream": {"schema": _STR}}}
    else:
        ok = {"description": "the answer", "content": {"application/json": {"schema": schema or _OBJ}}}
    return {status: ok, "default": {"description": "a refusal (4xx) in the wire's error envelope",
                                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}


_RUN_LINKS = ("run_get", "run_message", "run_rename", "run_interrupt", "run_cancel", "run_delete", "trace_get")
"""Operations a started run's ``id`` feeds (OpenAPI links: a stateful client follows them)."""
_CONTROL_LINKS = {"failures.fail_next": ("control_failures_remove", "failure"),
                  "failures.gate": ("control_failures_release", "gate")}


def _runtime(paths: dict[str, dict[str, object]]) -> None:
    for route in ROUTES:
        spec = RUNTIME_REQUESTS[route.op]
        path, params = _path_params(route.template)
        params = params + [{"name": name, "in": "query", "required": False, "schema": schema}
                           for name, schema in spec.get("query", {}).items()]
        params.append({"name": MIN_RUNTIME_HEADER, "in": "header", "required": False, "schema": _STR})
        if spec.get("keyed"):
            params.append({"name": IDEMPOTENCY_KEY, "in": "header", "required": False,
                           "schema": {"type": "string", "pattern": "^[!-~]{1,200}$"}})
        if spec.get("stream"):
            params.append({"name": LAST_EVENT_ID, "in": "header", "required": False, "schema": _STR})
        responses = _answers(spec.get("status", "200"), spec.get("answer"), stream=spec.get("stream", False))
        operation: dict[str, object] = {
            "operationId": route.op.replace(".", "_"),
            "summary": route.op,
            "tags": ["runtime"],
            "security": [{"accessToken": []}],
            "parameters": params,
            "responses": responses,
        }
        if route.op == "run.start":
            responses["201"]["links"] = {
                op: {"operationId": op, "parameters": {"run_id": "$response.body#/id"}} for op in _RUN_LINKS}
        if "body" in spec:
            operation["requestBody"] = {"required": route.method == "POST" and "required" in spec["body"],
                                        "content": {"application/json": {"schema": spec["body"]}}}
        paths.setdefault(path, {})[route.method.lower()] = operation


def _directory(paths: dict[str, dict[str, object]]) -> None:
    token_form = {"type": "object", "required": ["grant_type", "refresh_token", "client_id",
                                                  "client_assertion_type", "client_assertion"],
                  "properties": {"grant_type": {"enum": ["refresh_token"]}, "refresh_token": _STR, "client_id": _STR,
                                 "client_assertion_type": {"enum": [CLIENT_ASSERTION_TYPE]},
                                 "client_assertion": _STR}}
    paths[DIRECTORY_DISCOVERY_PATH] = {"get": {"operationId": "directory_discovery", "tags": ["directory"],
                                               "responses": _answers("200", {"type": "object",
                                                                             "required": ["issuer", "token_endpoint"]})}}
    paths[DIRECTORY_JWKS_PATH] = {"get": {"operationId": "directory_jwks", "tags": ["directory"],
                                          "responses": _answers("200", {"type": "object", "required": ["keys"]})}}
    paths[DIRECTORY_TOKEN_PATH] = {"post": {
        "operationId": "directory_token", "tags": ["directory"],
        "requestBody": {"required": True, "content": {"application/x-www-form-urlencoded": {"schema": token_form}}},
        "responses": _answers("200", {"type": "object", "required": ["access_token", "refresh_token", "expires_in"]}),
    }}


def _control(paths: dict[str, dict[str, object]]) -> None:
    for route in CONTROL_ROUTES:
        path, params = _path_params(CONTROL_PREFIX + route.template, route.params)
        responses = _answers("200", route.answer, stream=route.stream)
        operation: dict[str, object] = {
            "operationId": "control_" + route.name.replace(".", "_"),
            "summary": route.summary,
            "tags": ["control"],
            "security": [{"controlToken": []}],
            "parameters": params,
            "responses": responses,
        }
        if route.name in _CONTROL_LINKS:
            target, param = _CONTROL_LINKS[route.name]
            responses["200"]["links"] = {
                target: {"operationId": target, "parameters": {param: "$response.body#/id"}}}
        if route.stream:
            params.append({"name": LAST_EVENT_ID, "in": "header", "required": False,
                                            "schema": _STR})
        if route.method in ("POST", "PUT"):
            schema: dict[str, object] = {"type": "object",
                                      "properties": {f.name: f.schema() for f in route.body}}
            required = [f.name for f in route.body if f.required]
            if required:
                schema["required"] = required
            if not route.open_body:
                schema["additionalProperties"] = False
            if route.alternative:  # one of two forms (one change, or a batch of them)
                schema = {"anyOf": [schema, object_schema(route.alternative)]}
                required = required or [f.name for f in route.alternative if f.required]
            operation["requestBody"] = {"required": bool(required),
                                        "content": {"application/json": {"schema": schema}}}
        paths.setdefault(path, {})[route.method.lower()] = operation


def openapi_document(url: str = "http://127.0.0.1:8790") -> dict[str, object]:
    """The OpenAPI 3.1 document of a cloud served at ``url``."""
    paths: dict[str, dict[str, object]] = {}
    _directory(paths)
    _runtime(paths)
    _control(paths)
    return {
        "openapi": "3.1.0",
        "info": {"title": "workbench served cloud", "version": "1",
                 "description": "The crouter wire (directory and runtime) and the workbench control API, "
                                "as `workbench serve` answers them."},
        "servers": [{"url": url}],
        "paths": paths,
        "components": {
            "schemas": {"Error": _ERROR},
            "securitySchemes": {
                "accessToken": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                                "description": "a person's access token from the token endpoint"},
                "controlToken": {"type": "http", "scheme": "bearer",
                                 "description": "the control API's token (serve.json `token`)"},
            },
        },
    }
